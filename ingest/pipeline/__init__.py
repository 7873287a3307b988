"""The pipeline, the one owner of aggregation: dirty steps → aggregate, Gini, normalized family →
points → broadcast; the write side reaches it only through ingest.pipeline.kick."""
