exports.handler = async () => ({ values: 10n });
