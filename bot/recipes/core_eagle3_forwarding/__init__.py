"""Fix class core-eagle3-forwarding: SupportsEagle3's defaults forward to the language model."""
