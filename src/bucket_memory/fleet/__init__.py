"""Fleet commit, on the commit log: a write that meets others' goes on as an intent, folded by whoever commits next."""
