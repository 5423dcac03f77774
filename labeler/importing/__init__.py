"""`labeler import`: step labels a dataset already holds (human, or released), as a labels output."""
