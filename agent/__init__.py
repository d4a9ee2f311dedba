"""Agents: the Bayesian belief, the shared world model, the teacher and the day planner
(imports ``simulator`` only; see STYLE rule 1). The simulator-only agents, references and
the ``rhythm sim eval`` registry are in the sub-package ``agent.lab``, which the product
never imports.

Import from the modules, not from this package (it stays import-light)::

    from agent.belief import BeliefState          # Bayesian posterior over the profile
    from agent.world import PlanModel             # expected dynamics, plans rolled out
    from agent.teacher import BayesAgent          # the teacher (simulator Policy protocol)
    from agent.day import DayPlanner              # the real-day planner ("day-planner")
    from agent.lab.policies import register_agent_policies   # "bayes", ... for `rhythm sim eval`

See docs/agent.md.
"""
