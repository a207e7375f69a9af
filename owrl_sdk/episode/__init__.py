"""The core loop: one episode (loop), its runner and its run folder."""
