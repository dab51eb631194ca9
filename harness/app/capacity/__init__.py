"""`harness capacity`: the measured search, the virtual-clock search, fleets."""
