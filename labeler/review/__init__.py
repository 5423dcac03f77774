"""Looking at labels: the review app (`labeler view`), human corrections, and review queues (`labeler select --queue`)."""
