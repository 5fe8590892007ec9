"""Chapter studies: the surveys, searches, case recipes, rate fits and tables that exist for one chapter.

One module per topic; each builds on the mathematics of ``tokendynamics`` (which never imports from here).
"""
