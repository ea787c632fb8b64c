"""One-sided communication across the zipper: windows whose operations travel as messages."""
