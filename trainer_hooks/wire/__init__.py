"""The wire schema (docs/protocol.md), defined once: the sender builds its messages with it and
the server (`ingest`) validates them with it.

- `schema`: the vocabulary — limits, `ProtocolError`, the key grammar, the typed messages and
  the field readers every validator shares.
- `columns`: the sample column table (which columns a `samples` message has, of which kind)
  and the validator of columnar `samples` messages.
- `environments`: the validator of `environments` declarations (range declarations).
- `arrays`, `texts`: the msgpack extension values — typed number arrays, packed text columns.
- `protocol`: the public face — `decode_frame`, `validate_message`, encoding a message for the
  wire and splitting one the server refused as too large; re-exports the names above.

Pure: no Django, no Channels, no torch.
"""
