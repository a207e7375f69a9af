"""Process support: console, folders, files and locks, interrupts, logging, answer matching."""
