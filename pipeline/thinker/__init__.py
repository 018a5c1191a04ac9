"""Building blocks of the Thinker (seed 000): the quick check, the per-turn tool cache, the search
budget, the thinking normaliser, the text protocol and the tools. The ReAct loop over them is the
node `pipeline/nodes/thinker.py`."""
