"""The plugin contract: the plugin manager and catalogue, the hook specifications, and the component bases."""
