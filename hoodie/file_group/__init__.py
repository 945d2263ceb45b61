"""File groups and slices, base files, log files and log blocks."""
