"""Fake agent: deletes its own worktree (the working directory) entirely, then exits 0."""
import os
import shutil

shutil.rmtree(os.getcwd())
print("wrecked")
