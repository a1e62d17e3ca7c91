export default {
  handler: async () => 'default export',
};
