"""The Hudi timeline: instants, both file-name layouts, the active and archived timelines."""
