NAME = "root shared"
