# An app module that does not import: the serve: supervisor reports its
# stderr.
import openenv_module_that_is_not_there  # noqa: F401
