# An app module that takes a minute to import: /health never answers in
# the test's start timeout.
import time

time.sleep(60)
app = None
