"""Where watchkeeper keeps its state and looks for its settings unless told otherwise.

A leaf of its own so the commands that start processes find the embedded store
without loading the configuration model.
"""

#: The data folder, relative to where a command runs (or to its configuration file).
DEFAULT_DATA_DIR = ".watchkeeper"
#: The embedded SQLite database's file name inside the data folder.
DATABASE_FILE = "watchkeeper.db"
#: The configuration file users keep next to their work; read only when named.
LOCAL_CONFIG = "watchkeeper.toml"

# Environment variables, spelled once: the commands that start processes read them
# before (or instead of) loading the configuration model.
#: Names the configuration file when ``--config`` does not.
CONFIG_ENV = "WATCHKEEPER_CONFIG"
#: A database URL that overrides the file's (and the embedded store).
DATABASE_URL_ENV = "WATCHKEEPER_DATABASE_URL"
#: The agent session a run or a parked turn belongs to.
SESSION_ENV = "WATCHKEEPER_SESSION_ID"
