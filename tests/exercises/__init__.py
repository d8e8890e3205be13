"""Change exercises (issue 50): each module here is the one file a contributor adds for one
kind of change; ``tests/contracts/test_change_exercises.py`` adds its one row and runs it end to end."""
