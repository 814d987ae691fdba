"""Episode runners: bots and the model playing the games, producing `Trajectory` records."""
