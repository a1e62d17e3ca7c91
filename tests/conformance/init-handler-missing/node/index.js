exports.other = async () => 'wrong name';
