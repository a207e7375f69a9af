"""Safety: addresses and domains an episode may reach, secrets and their redaction, the blocklist."""
