NAME = "sibling helper"
