exports.handler = async () => {
  return 'missing brace';
