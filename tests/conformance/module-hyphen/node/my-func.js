exports.handler = async () => 'hyphenated module';
