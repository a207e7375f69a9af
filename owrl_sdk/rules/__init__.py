"""Input, output-schema and URL rules: the one place values and start URLs are checked and filled."""
