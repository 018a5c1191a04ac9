"""Building blocks of the Thinker (seed 000): the quick check, the per-turn tool cache, the search
budget, the thinking normaliser and the text protocol. The node that runs the ReAct loop over
them is not wired into the chain yet (pipeline/nodes/thinker.py still passes the reply through)."""
