"""Solver engines shared by every problem class: CP-SAT, HiGHS, CBC, model export, deadlines.

A problem class builds its model; an engine runs it.  Nothing here knows P1, P2 or P3.
"""
