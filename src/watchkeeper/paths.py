"""Where watchkeeper keeps its state unless configured otherwise.

A leaf of its own so the commands that start processes find the embedded store
without loading the configuration model.
"""

#: The data folder, relative to where a command runs (or to its configuration file).
DEFAULT_DATA_DIR = ".watchkeeper"
#: The embedded SQLite database's file name inside the data folder.
DATABASE_FILE = "watchkeeper.db"
