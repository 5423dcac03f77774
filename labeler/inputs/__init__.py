"""Input rows: readers for files and hub datasets, presets for known formats, step splitting."""
