exports.app = {
  handler: async () => 'hello from src/hello_world app',
};
