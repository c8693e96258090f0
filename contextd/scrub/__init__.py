"""Secret scrubbing: the rules and the one call that redacts text before it is stored.
"""
