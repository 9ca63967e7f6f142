"""REST routes of the gateway, one module per area; `spot.router` carries the spot-gate API."""
