"""A job's output: where it lives, its manifest and commit records, Parquet shards, reading them back."""
