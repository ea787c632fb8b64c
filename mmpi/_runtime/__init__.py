"""The rank's life in the bridged world: joining it at import, the facade, progress threads."""
