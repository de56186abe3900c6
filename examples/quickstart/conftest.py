# Makes `calc` importable when pytest runs from this folder.
