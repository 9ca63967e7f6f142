"""What the backlog does, each built once by `bootstrap` with its collaborators as constructor
arguments: the queue's operations (`backlog`: list, append, pin, unpin, remove), pulls and start now
(`pull`), the spawn saga and its recovery (`start`), holds for a human decision (`holds`), spot-gate's
session events consumed (`session_events`), and what the backlog asks outside itself: spot-gate
(`spot.SpotGateClient`) and GitHub (`github.GithubClient`)."""
