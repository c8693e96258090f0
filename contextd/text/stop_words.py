"""The English words a query writes that locate nothing, shared by query understanding (the
lexical query and the prose stems), the dependency provider and the path words."""

from __future__ import annotations

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each else even ever
few for from further get gets got had has have having he her here hers him his how i if in
into is it its itself just let like make makes may me might more most must my no nor not now
of off on once only or other our ours out over own per please same shall she should so some
such than that the their them then there these they this those through to too under until up
upon us very via was we were what when where whether which while who whom why will with would
you your see instead without within wrong currently already still always never new way ways use
used uses using instead should able need needs needed want wants one two
""".split())
