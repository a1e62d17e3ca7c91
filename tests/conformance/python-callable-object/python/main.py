class Handler:
    def __call__(self, event, context):
        return "called instance"


handler = Handler()
