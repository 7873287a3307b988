"""The write side: sockets and HTTP in, auth and admission, one apply path per message: raw rows,
dirty steps, ack; it only kicks the pipeline (ingest.pipeline.kick)."""
