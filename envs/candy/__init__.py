"""Candy Crush (`coplay/CandyCrush-v0`): bitboard rules, text, features, the gymnasium env and the bots.
Never imports `coplay`."""
