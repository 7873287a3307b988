"""The sender: `connect()` and the `Client` on the caller's side, and the sender thread that
seals what is logged into a durable outbox and streams it to the server.

- `client`: `connect`, `Client` — `log_*` only append to the call queue.
- `options`: `SenderOptions`, every keyword option of `connect`.
- `run`: `RunTarget`, the server, token and run a client sends to.
- `queue`: the call queue between the caller's threads and the sender thread, and the callers
  waiting in `flush()` / `sync()`.
- `bookkeeping`: counters, the ledger of values not stored, warnings logged once.
- `engine`: the sender thread, which builds and runs the two parts below.
- `sealer`: call queue → validated, sealed messages in the outbox, with `samples` (one
  `log_samples` call → columns), `batching` (columns → samples messages) and `resume`
  (samples stored once across a resume).
- `timeline`: the client's `span`, `log_events`, `log_gauges` and `attach`, over the buffers of
  `trainer_hooks.timeline` (their messages enter the call queue as control messages).
- `connection`: outbox → server (batch frames, acks, reconnects, close codes).
- `outbox`: the durable outbox (SQLite per server, token and run name).
- `spooled`: what an outbox file holds, read without changing it (pending messages by type,
  where they go).
- `sync`: `telescope sync`, delivering the outboxes trainers left undelivered with the
  connection above (command line: `trainer_hooks.sync`).

Each part is handed what it works with when it is made; none imports the part that made it.
"""
