"""The trash pipeline of archived sessions' clones."""
