module.exports = {
  handler: async () => ({ format: 'cjs', hasRequire: typeof require === 'function' }),
};
