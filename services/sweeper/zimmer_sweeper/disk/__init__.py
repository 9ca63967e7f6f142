"""This host's disk: roots and fences, removal, what every sweep records, the free-space monitor."""
