"""The composition: the verbs, the scenario, building and running a job from the parts."""
