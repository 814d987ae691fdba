"""2048 (`coplay/2048-v0`): pure rules, text, features, the gymnasium env and the bots. Never imports
`coplay`."""
