"""Leader/follower replication: follower fetchers, ISR tracking and high watermarks."""
