"""Change data capture: CDC log files (writer and decoder) and the CDC query."""
